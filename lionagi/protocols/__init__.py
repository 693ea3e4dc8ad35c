"""Conversation protocols: messages, tools and context providers."""
