import sys

from kgqa.cli import main

sys.exit(main())
