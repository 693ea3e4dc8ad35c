"""Conversations: the Branch, and the Session that groups branches under one observer."""
