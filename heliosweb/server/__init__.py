"""Every override of a library's internals, one module each: the web server's, and the workers' broker transport (README.md)."""
