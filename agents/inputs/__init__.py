"""What users send besides text: attachments (photos, files, PDFs) and voice notes (the speech-to-text engines
behind `SpeechToText`: openai-whisper, or faster-whisper where installed)."""
