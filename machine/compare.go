package machine

import (
	"math/big"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// compare orders two attribute values as DynamoDB's comparisons do:
// numbers by value, strings by their UTF-8 bytes, booleans for equality
// only. comparable is false across types, which DynamoDB evaluates as a
// failed condition.
func compare(a, b types.AttributeValue) (c int, comparable bool) {
	switch a := a.(type) {
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		if !ok {
			return 0, false
		}
		x, okA := new(big.Float).SetString(a.Value)
		y, okB := new(big.Float).SetString(b.Value)
		if !okA || !okB {
			return 0, false
		}
		return x.Cmp(y), true
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		if !ok {
			return 0, false
		}
		return strings.Compare(a.Value, b.Value), true
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		if !ok || a.Value != b.Value {
			return 1, ok
		}
		return 0, true
	}
	return 0, false
}

// contains is DynamoDB's contains(attr, s) for a string: a list holding
// the string, a string set holding it, or a string containing it.
func contains(av types.AttributeValue, s string) bool {
	switch v := av.(type) {
	case *types.AttributeValueMemberL:
		for _, e := range v.Value {
			if es, ok := e.(*types.AttributeValueMemberS); ok && es.Value == s {
				return true
			}
		}
	case *types.AttributeValueMemberSS:
		return slices.Contains(v.Value, s)
	case *types.AttributeValueMemberS:
		return strings.Contains(v.Value, s)
	}
	return false
}
