package accounting

// UsageCost returns what usage costs at the reservation's model price
// and price factor, in micro-dollars: the amount Settle books on its
// cost limits. ok is false when the model has no price (and no default
// applies).
func (r *Reservation) UsageCost(usage Usage) (cost int64, ok bool) {
	if r.l == nil {
		// Not one of a Limiter's.
		return 0, false
	}
	if !r.hasPrice {
		return 0, false
	}
	return r.price.UsageCost(usage), true
}
