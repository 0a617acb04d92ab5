"""`python -m analysis RESULTS --figures DIR`: every figure, table and report from the records."""

if __name__ == "__main__":
    from analysis.cli import main

    raise SystemExit(main())
