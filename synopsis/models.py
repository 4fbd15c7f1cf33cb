# Summaries, fact extraction and synopses arrive with the synopsis issue.
