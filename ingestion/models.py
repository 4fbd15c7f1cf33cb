# Documents, chunks and their knowledge memories arrive with the ingestion issue.
