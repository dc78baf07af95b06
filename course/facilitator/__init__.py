"""The facilitator's guide, generated: each lab's real target, its cost and quota, the agendas, the 2026 map and
Studio's sizing for an event (``python -m course.facilitator.workshop --write docs/facilitator.md``)."""
