"""Report formats other tools read (JUnit XML), written and read back; nothing here knows about GitHub."""
