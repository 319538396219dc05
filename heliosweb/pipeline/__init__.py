"""The project's own request pipeline: middleware named in `settings.MIDDLEWARE`, storage, which pages may open a socket."""
