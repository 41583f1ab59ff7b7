package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/metadata"
)

// scramCode is kafkaCode for the answers of Describe/AlterUserScramCredentials.
func scramCode(err error) int16 {
	switch {
	case errors.Is(err, metadata.ErrScramNotFound):
		return kerr.ResourceNotFound.Code
	case errors.Is(err, metadata.ErrScramMechanism):
		return kerr.UnsupportedSaslMechanism.Code
	case errors.Is(err, metadata.ErrScramCredential):
		return kerr.UnacceptableCredential.Code
	case errors.Is(err, metadata.ErrScramDuplicate):
		return kerr.DuplicateResource.Code
	}
	return kafkaCode(err)
}
