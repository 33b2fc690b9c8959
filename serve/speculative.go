package serve

// predictionDetails is OpenAI's completion_tokens_details for predicted
// tokens, which speculative decoding's drafts are: those the model took
// and those it did not.
type predictionDetails struct {
	Accepted int `json:"accepted_prediction_tokens"`
	Rejected int `json:"rejected_prediction_tokens"`
}

// predictions reports res's drafts, nil when nothing was drafted.
func predictions(res Result) *predictionDetails {
	if res.Drafted == 0 {
		return nil
	}
	return &predictionDetails{Accepted: res.Accepted, Rejected: res.Drafted - res.Accepted}
}
