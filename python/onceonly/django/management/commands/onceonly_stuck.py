"""manage.py onceonly_stuck [--job T] [--json]: claims past their lease (as ``onceonly stuck``)."""
from onceonly.django import reads

from .onceonly_held import Command as HeldCommand


class Command(HeldCommand):
    help = "List stuck claims (claimed, lease over), oldest first"
    read = staticmethod(reads.stuck)
    noun = "stuck (claimed, lease over; the next delivery takes them over by policy)"
