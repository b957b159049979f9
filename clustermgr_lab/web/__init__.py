"""The web layer: tornado handlers only, thin adapters from HTTP and WebSocket to the manager."""
