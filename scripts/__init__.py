"""Operations scripts' Python: what a GPU host's one command runs (`scripts/gpu-check`), kept out of
the library packages it drives."""
