"""What users send besides text: attachments (photos, files, PDFs) and voice notes (whisper)."""
