from catalog_generator.catalog import main

main()
