"""Every call of the v1 API as a function returning a ``Call``: the request and how to
read its answer. The clients' methods are these functions, sent."""
