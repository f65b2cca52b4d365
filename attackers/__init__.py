"""Attacks on sanitized releases. Each module is one attack, registered by entry point."""
