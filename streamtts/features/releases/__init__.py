"""Gray releases. The routing rule on `tts.config`: read live (`watch`), its state changes
written (`store`); which lane a request takes (`routing`, segment stage) and what a lane
renders differently (`profile`, synthesize stage); a lane's topics (`lanes`); the pure
judgement (`guard`), the guard that follows results and rolls back (`auto_rollback`), and a
candidate's canary reports (`canary_reports`)."""
