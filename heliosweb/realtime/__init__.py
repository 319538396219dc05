"""Pushing to websockets: the Redis fan-out every web process reads, the channel layer, and what every socket shares."""
