"""One Litestar controller per resource. Handlers parse, call one domain service, map the result."""
