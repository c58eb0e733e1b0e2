"""Inputs that arrive as something other than text: the speech-to-text engines behind `SpeechToText`.

Layer: same rank as `agents.tools`; modules here import only `agents.core` and each other.
"""
