"""The synthetic product catalogue: its taxonomy, generator, splits and tokenizer, and the TF-IDF baseline."""
