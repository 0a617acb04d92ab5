"""`python -m loaderbench.analysis RESULTS --figures DIR`: every figure, table and report from the records."""

if __name__ == "__main__":
    from loaderbench.analysis.figures.draw_all import main

    raise SystemExit(main())
