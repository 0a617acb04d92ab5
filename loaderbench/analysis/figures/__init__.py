"""Figures, one function each, named after what it shows, writing PNG (+ PDF, SVG when asked: formats.py): a
study's scaling figures from its analysis (scaling.py, model.py, recommend.py), the figure of the question a study
answers from its rows (questions/), and accelerator feeding (gpu_feed.py). style.py is the look they share."""
