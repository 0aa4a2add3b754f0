"""TODO package doc."""
