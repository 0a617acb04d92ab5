"""`python -m loaderbench ...` is the same as the `loaderbench` console script."""

if __name__ == "__main__":  # spawn workers import this module as __mp_main__: do nothing then
    from loaderbench.cli import main

    raise SystemExit(main())
