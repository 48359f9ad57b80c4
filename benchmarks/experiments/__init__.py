"""The paper's experiments (Fig. 5, 6, 7, 9) as commands: a table, a CSV and a plot each."""
