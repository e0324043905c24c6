"""Audio retention: the policy (days per tenant, expiry markers, object tags: `policy`) and
the bucket lifecycle rules that enforce it (`lifecycle`, applied by `streamtts storage apply`)."""
