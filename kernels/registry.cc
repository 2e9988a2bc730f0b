// kernel registry (filled below)
