from benchmarks.gpu._suite import main


raise SystemExit(main())
