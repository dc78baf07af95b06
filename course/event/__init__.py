"""The event account at run time: the facilitator's clean-up of the whole room and the attendees' roles in it."""
