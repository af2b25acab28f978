"""Maintenance tools, each run as ``python -m tta.tools.<name>``: they write generated docs pages and shipped data
files. No run imports them; tests check that what is shipped equals what they generate."""
