"""The OpenCode server's I/O: the HTTP client, its retries, the event stream, the binary."""
