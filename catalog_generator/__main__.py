from catalog_generator import catalog

catalog.main()
