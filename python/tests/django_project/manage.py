#!/usr/bin/env python
"""manage.py of the Django project the tests run (tests/test_django*.py)."""
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproj.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
