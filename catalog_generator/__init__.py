"""The synthetic product catalogue's generator: its taxonomy, its titles, and the catalogue directories made from them
(``python -m catalog_generator build|shards|from-csv``). The helpers read what it writes (:mod:`helpers.data`)."""
