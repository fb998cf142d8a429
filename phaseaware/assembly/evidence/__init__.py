"""Which characters of a chunk are its key evidence: the definition (``keys``), the
evidence-string search (``search``) and the same search vectorised (``vector``)."""
