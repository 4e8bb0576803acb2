from ci_evals.cli import main

raise SystemExit(main())
