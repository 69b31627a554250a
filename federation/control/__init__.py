"""The control loop: load the federation snapshot, repair and fail over, plan, propagate,
audit and dispatch. ``loop.RoundScheduler`` runs one round at a time off the event loop;
``snapshot`` turns store rows into the immutable snapshot a round plans over."""
