"""Text for Telegram: the model's Markdown as Telegram HTML (markdown.py), cut into messages Telegram accepts
(chunks.py). Pure functions, no I/O."""
