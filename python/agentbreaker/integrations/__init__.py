"""Integrations of agentbreaker with other libraries; each imports its library lazily."""
