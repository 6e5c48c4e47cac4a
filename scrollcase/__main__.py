import sys

from scrollcase.cli import main

sys.exit(main())
