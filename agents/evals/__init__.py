"""Evaluations of the product's behaviour against the real model (`agentlab eval …`); not part of the bot."""
