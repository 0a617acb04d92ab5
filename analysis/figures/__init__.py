"""Figures: one function per question, each taking the tidy table and writing PNG + PDF."""
