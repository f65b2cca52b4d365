"""Attacks on sanitized releases. Each package is one attack, registered by entry point."""
