"""What the web server changes in Django, asgiref, Channels, Twisted and autobahn, all in one place (README.md)."""
