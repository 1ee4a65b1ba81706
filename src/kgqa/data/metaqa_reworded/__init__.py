"""MetaQA questions in kgqa's own wordings (see README.md)."""
