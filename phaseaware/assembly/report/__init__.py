"""What the caller gets: the result types (``result``) and the result built from the
measured prompt (``build``)."""
