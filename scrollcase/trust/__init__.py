"""What a host can trust without GitHub: TUF-signed store metadata and the signed GPU proof (docs/trust.md)."""
